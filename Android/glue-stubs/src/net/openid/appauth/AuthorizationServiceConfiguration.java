// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package net.openid.appauth;

import android.net.Uri;
import androidx.annotation.NonNull;

public class AuthorizationServiceConfiguration {
    public AuthorizationServiceConfiguration(@NonNull Uri authorizationEndpoint, @NonNull Uri tokenEndpoint) {
        throw new UnsupportedOperationException("stub");
    }
}
