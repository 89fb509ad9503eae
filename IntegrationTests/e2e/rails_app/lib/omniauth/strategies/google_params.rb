require "base64"
require "digest"
require "jwt"
require_relative "google_oauth2"

module OmniAuth
  module Strategies
    # "Sign in with Google" for CallbackProxy's `params` hand-off: the site's ordinary strategy
    # plus the token path of omniauth-google-oauth2 (which Debian does not package), kept as
    # close to that gem as the test IdP allows. The app's one setting for this mode is
    # `authorized_client_ids`: the native (iOS/Android) client ids whose tokens it accepts.
    #
    # Like omniauth-google-oauth2's `get_access_token`: a callback with a `code` is an ordinary
    # web sign-in (redeemed at the IdP's own token URL — this mode changes no token URL); a
    # callback with an `access_token` is accepted as the token itself, once it is known to have
    # been issued to `client_id` or one of `authorized_client_ids`. OmniAuth's callback phase
    # has already checked `state` against the session (csrf_detected) before any of this runs.
    #
    # The gem learns the access token's audience from Google's tokeninfo endpoint; the test IdP
    # has none, so the id_token that came with it stands in: its signature against the IdP's
    # JWKS, `iss`, `aud` ∈ [client_id, *authorized_client_ids] and `exp` (what the gem's `extra`
    # and omniauth-apple check), and its `at_hash` binds the access token to it. Identity still
    # comes from userinfo with the access token, as for the code path.
    class GoogleParams < GoogleOauth2
      option :name, "google_params"
      option :authorized_client_ids, []
      option :jwt_leeway, 60
      option :client_options, {
        site: ISSUER,
        authorize_url: "#{ISSUER}/authorize",
        token_url: "#{ISSUER}/token",
      }

      def build_access_token
        return super if request.params["code"] || !request.params["access_token"]

        verify_id_token!(request.params["id_token"], request.params["access_token"])
        ::OAuth2::AccessToken.from_hash(client, request.params.dup)
      end

      private

      def verify_id_token!(id_token, access_token)
        raise CallbackError.new(:invalid_credentials, "no id_token with the access_token") if id_token.to_s.empty?

        claims, = ::JWT.decode(id_token, nil, true,
                               algorithms: ["RS256"], jwks: ->(_options) { jwks },
                               iss: ISSUER, verify_iss: true,
                               aud: [options.client_id, *options.authorized_client_ids], verify_aud: true,
                               verify_expiration: true, leeway: options.jwt_leeway)
        unless claims["at_hash"] == at_hash(access_token)
          raise CallbackError.new(:invalid_credentials, "access_token not the id_token's")
        end
        claims
      rescue ::JWT::InvalidAudError
        raise CallbackError.new(:invalid_credentials, "id_token not issued to an authorized client")
      rescue ::JWT::DecodeError
        # JWT's errors are not OmniAuth's: without this the callback would answer 500. (The
        # reason becomes the user's flash message: short, no token contents.)
        raise CallbackError.new(:invalid_credentials, "id_token did not verify")
      end

      # Fetched per verification: a sign-in is rare, and a rotated key is then never missed.
      def jwks
        client.request(:get, "#{ISSUER}/jwks").parsed
      end

      # OpenID Connect Core 3.1.3.6: base64url of the left half of SHA-256(access_token).
      def at_hash(access_token)
        Base64.urlsafe_encode64(Digest::SHA256.digest(access_token)[0, 16], padding: false)
      end
    end
  end
end
