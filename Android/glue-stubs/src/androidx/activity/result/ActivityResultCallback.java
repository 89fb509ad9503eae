// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package androidx.activity.result;

public interface ActivityResultCallback<O> {
    void onActivityResult(O result);
}
