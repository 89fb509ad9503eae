// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package androidx.activity.result.contract;

import android.content.Intent;
import androidx.activity.result.ActivityResult;

public final class ActivityResultContracts {
    public static final class StartActivityForResult extends ActivityResultContract<Intent, ActivityResult> {
        public StartActivityForResult() { throw new UnsupportedOperationException("stub"); }
    }
}
