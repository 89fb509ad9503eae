require "omniauth-oauth2"

module OmniAuth
  module Strategies
    # The site's "Sign in with Google": an ordinary omniauth-oauth2 strategy, the kind a legacy
    # Rails site writes (or copies) for an OpenID provider. In the end-to-end tests "Google" is the
    # strict test IdP at GOOGLE_ISSUER (HTTPS with a throwaway CA that Ruby's OpenSSL trusts through
    # SSL_CERT_FILE); the web client is confidential and authenticates with client_secret_post
    # (oauth2 1.4's default), and PKCE is on.
    #
    # Identity comes from the userinfo endpoint, called with the access token — not from the
    # id_token. Behind CallbackProxy's relay hand-off the token response the app receives is the
    # one the proxy obtained with the *native* client, so its id_token's audience is the native
    # client id; an app that insisted on aud == its web client id would have to be changed
    # (omniauth-google-oauth2's authorized_client_ids). userinfo works for both kinds of token.
    class GoogleOauth2 < OmniAuth::Strategies::OAuth2
      ISSUER = ENV.fetch("GOOGLE_ISSUER", "https://accounts.google.com")

      option :name, "google_oauth2"
      option :pkce, true
      option :scope, "openid email profile"
      option :access_type, "online"
      option :prompt, "select_account"
      option :authorize_options, %i[scope access_type prompt]

      option :client_options, {
        site: ISSUER,
        authorize_url: "#{ISSUER}/authorize",
        # The one line changed for CallbackProxy's relay hand-off: the token URL points at the
        # proxy's relay token endpoint. Without OAUTH_TOKEN_URL it is the IdP's own.
        token_url: ENV["OAUTH_TOKEN_URL"] || "#{ISSUER}/token",
      }

      uid { raw_info["sub"] }

      info do
        { email: raw_info["email"], name: raw_info["name"] }
      end

      extra do
        { raw_info: raw_info }
      end

      def raw_info
        @raw_info ||= access_token.get("#{ISSUER}/userinfo").parsed
      end

      # omniauth-oauth2 1.8 appends the current query string (code, state) to redirect_uri in the
      # token request; the IdP compares redirect URIs exactly, so send the bare callback URL.
      # (Built from the request's Host header: the proxy preserves it.)
      def callback_url
        full_host + callback_path
      end
    end
  end
end
