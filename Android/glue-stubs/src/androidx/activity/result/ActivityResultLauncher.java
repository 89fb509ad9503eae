// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package androidx.activity.result;

public abstract class ActivityResultLauncher<I> {
    public void launch(I input) { throw new UnsupportedOperationException("stub"); }
    public abstract void unregister();
}
