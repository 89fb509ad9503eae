// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package net.openid.appauth;

import android.content.Context;
import android.content.Intent;
import android.net.Uri;
import androidx.annotation.NonNull;
import androidx.browser.customtabs.CustomTabsIntent;

public class AuthorizationService {
    public AuthorizationService(@NonNull Context context) { throw new UnsupportedOperationException("stub"); }
    public CustomTabsIntent.Builder createCustomTabsIntentBuilder(Uri... possibleUris) { throw new UnsupportedOperationException("stub"); }
    public Intent getAuthorizationRequestIntent(@NonNull AuthorizationRequest request) { throw new UnsupportedOperationException("stub"); }
    public Intent getAuthorizationRequestIntent(@NonNull AuthorizationRequest request, @NonNull CustomTabsIntent customTabsIntent) {
        throw new UnsupportedOperationException("stub");
    }
    public void dispose() { throw new UnsupportedOperationException("stub"); }
}
