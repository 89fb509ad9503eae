// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.content;

import android.net.Uri;
import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

public class Intent {
    public static final String ACTION_VIEW = "android.intent.action.VIEW";
    public static final String CATEGORY_BROWSABLE = "android.intent.category.BROWSABLE";
    public static final int FLAG_ACTIVITY_CLEAR_TOP = 0x04000000;
    public static final int FLAG_ACTIVITY_SINGLE_TOP = 0x20000000;

    public Intent(String action, Uri uri) { throw new UnsupportedOperationException("stub"); }
    public Intent(Context packageContext, Class<?> cls) { throw new UnsupportedOperationException("stub"); }

    public @Nullable String getAction() { throw new UnsupportedOperationException("stub"); }
    public @Nullable Uri getData() { throw new UnsupportedOperationException("stub"); }
    public @NonNull Intent addCategory(String category) { throw new UnsupportedOperationException("stub"); }
    public @NonNull Intent addFlags(int flags) { throw new UnsupportedOperationException("stub"); }
}
