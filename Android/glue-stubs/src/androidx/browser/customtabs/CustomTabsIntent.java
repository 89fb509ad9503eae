// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package androidx.browser.customtabs;

import androidx.annotation.NonNull;

public final class CustomTabsIntent {
    public static final class Builder {
        public Builder() { throw new UnsupportedOperationException("stub"); }
        @ExperimentalEphemeralBrowsing
        public @NonNull Builder setEphemeralBrowsingEnabled(boolean enabled) { throw new UnsupportedOperationException("stub"); }
        public @NonNull CustomTabsIntent build() { throw new UnsupportedOperationException("stub"); }
    }
}
