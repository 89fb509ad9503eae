// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package androidx.activity.result;

import android.content.Intent;
import androidx.annotation.Nullable;

public final class ActivityResult {
    public ActivityResult(int resultCode, @Nullable Intent data) { throw new UnsupportedOperationException("stub"); }
    public int getResultCode() { throw new UnsupportedOperationException("stub"); }
    public @Nullable Intent getData() { throw new UnsupportedOperationException("stub"); }
}
