// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package net.openid.appauth;

import android.content.Intent;
import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

public class AuthorizationResponse {
    public final @NonNull AuthorizationRequest request = null;

    public static @Nullable AuthorizationResponse fromIntent(@NonNull Intent dataIntent) {
        throw new UnsupportedOperationException("stub");
    }
}
