module Users
  class OmniauthCallbacksController < Devise::OmniauthCallbacksController
    def google_oauth2
      @user = User.from_omniauth(request.env["omniauth.auth"])
      sign_in_and_redirect @user, event: :authentication
      set_flash_message(:notice, :success, kind: "Google")
    end
    alias google_params google_oauth2

    # Devise's own failure action sets the flash ("Could not authenticate you from GoogleOauth2
    # because "<reason>".") and redirects here: the home page, which shows it.
    protected

    def after_omniauth_failure_path_for(_scope)
      root_path
    end
  end
end
