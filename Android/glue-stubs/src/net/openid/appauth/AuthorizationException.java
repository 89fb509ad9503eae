// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package net.openid.appauth;

import android.content.Intent;
import androidx.annotation.Nullable;

public final class AuthorizationException extends Exception {
    public final @Nullable String errorDescription = null;

    public static final class GeneralErrors {
        public static final AuthorizationException USER_CANCELED_AUTH_FLOW = null;
    }

    public static @Nullable AuthorizationException fromIntent(Intent data) { throw new UnsupportedOperationException("stub"); }
}
