// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.os;

import androidx.annotation.Nullable;

public final class Bundle {
    public @Nullable String getString(@Nullable String key) { throw new UnsupportedOperationException("stub"); }
    public void putString(@Nullable String key, @Nullable String value) { throw new UnsupportedOperationException("stub"); }
}
