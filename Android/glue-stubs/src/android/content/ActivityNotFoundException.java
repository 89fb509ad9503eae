// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.content;

public class ActivityNotFoundException extends RuntimeException {
    public ActivityNotFoundException() { throw new UnsupportedOperationException("stub"); }
}
