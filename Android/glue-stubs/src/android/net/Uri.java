// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.net;

public abstract class Uri {
    public static Uri parse(String uriString) { throw new UnsupportedOperationException("stub"); }
    public abstract String toString();
}
