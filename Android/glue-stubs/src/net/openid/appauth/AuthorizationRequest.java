// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package net.openid.appauth;

import android.net.Uri;
import androidx.annotation.NonNull;
import androidx.annotation.Nullable;
import java.util.Map;

public class AuthorizationRequest {
    public final @NonNull String clientId = null;
    public final @NonNull Uri redirectUri = null;
    public final @Nullable String state = null;
    public final @Nullable String codeVerifier = null;

    public static final class Builder {
        public Builder(@NonNull AuthorizationServiceConfiguration configuration, @NonNull String clientId,
                       @NonNull String responseType, @NonNull Uri redirectUri) {
            throw new UnsupportedOperationException("stub");
        }
        public @NonNull Builder setState(@Nullable String state) { throw new UnsupportedOperationException("stub"); }
        public @NonNull Builder setScope(@Nullable String scope) { throw new UnsupportedOperationException("stub"); }
        public @NonNull Builder setNonce(@Nullable String nonce) { throw new UnsupportedOperationException("stub"); }
        public @NonNull Builder setPrompt(@Nullable String prompt) { throw new UnsupportedOperationException("stub"); }
        public Builder setLoginHint(@Nullable String loginHint) { throw new UnsupportedOperationException("stub"); }
        public @NonNull Builder setCodeVerifier(@Nullable String codeVerifier, @Nullable String codeVerifierChallenge,
                                                @Nullable String codeVerifierChallengeMethod) {
            throw new UnsupportedOperationException("stub");
        }
        public @NonNull Builder setAdditionalParameters(@Nullable Map<String, String> additionalParameters) {
            throw new UnsupportedOperationException("stub");
        }
        public @NonNull AuthorizationRequest build() { throw new UnsupportedOperationException("stub"); }
    }
}
