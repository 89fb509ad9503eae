// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.content;

public abstract class Context {
    public abstract void startActivity(Intent intent);
}
