# A deployed legacy site: production settings, plain HTTP behind a proxy on loopback.
# SECRET_KEY_BASE comes from the environment (the test fixture makes one up).
Rails.application.configure do
  config.cache_classes = true
  config.eager_load = true
  config.consider_all_requests_local = false
  config.public_file_server.enabled = false
  # send_file hands the download to the front server (the proxy's x_accel_redirect), as behind nginx.
  config.action_dispatch.x_sendfile_header = "X-Accel-Redirect"
  config.force_ssl = false
  config.log_level = :info
  config.log_tags = [:request_id]
  config.logger = ActiveSupport::TaggedLogging.new(ActiveSupport::Logger.new($stdout))
  config.i18n.fallbacks = true
  config.active_support.deprecation = :log
  config.active_record.dump_schema_after_migration = false
end
