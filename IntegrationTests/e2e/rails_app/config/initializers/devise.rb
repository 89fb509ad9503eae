require Rails.root.join("lib/omniauth/strategies/google_oauth2").to_s
require Rails.root.join("lib/omniauth/strategies/google_params").to_s

Devise.setup do |config|
  require "devise/orm/active_record"

  config.mailer_sender = "no-reply@example.test"
  config.sign_out_via = :delete

  # The web client registered at "Google" for this site.
  config.omniauth :google_oauth2, ENV.fetch("GOOGLE_CLIENT_ID"), ENV.fetch("GOOGLE_CLIENT_SECRET")
  # The same web client, for CallbackProxy's params hand-off: the one setting is the native
  # client ids whose tokens the site accepts (omniauth-google-oauth2's authorized_client_ids).
  config.omniauth :google_params, ENV.fetch("GOOGLE_CLIENT_ID"), ENV.fetch("GOOGLE_CLIENT_SECRET"),
                  authorized_client_ids: ENV.fetch("GOOGLE_AUTHORIZED_CLIENT_IDS", "").split(",")
end
