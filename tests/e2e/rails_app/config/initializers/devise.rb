require Rails.root.join("lib/omniauth/strategies/google_oauth2").to_s

Devise.setup do |config|
  require "devise/orm/active_record"

  config.mailer_sender = "no-reply@example.test"
  config.sign_out_via = :delete

  # The web client registered at "Google" for this site.
  config.omniauth :google_oauth2, ENV.fetch("GOOGLE_CLIENT_ID"), ENV.fetch("GOOGLE_CLIENT_SECRET")
end
