// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package androidx.activity;

import android.app.Activity;
import androidx.activity.result.ActivityResultCallback;
import androidx.activity.result.ActivityResultLauncher;
import androidx.activity.result.contract.ActivityResultContract;
import androidx.annotation.NonNull;

public class ComponentActivity extends Activity {
    public final @NonNull <I, O> ActivityResultLauncher<I> registerForActivityResult(
            @NonNull ActivityResultContract<I, O> contract, @NonNull ActivityResultCallback<O> callback) {
        throw new UnsupportedOperationException("stub");
    }
}
