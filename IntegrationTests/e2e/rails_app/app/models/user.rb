class User < ApplicationRecord
  # Social sign-in only; :trackable counts sign-ins (the tests read the count on the home page).
  devise :omniauthable, :trackable, omniauth_providers: %i[google_oauth2 google_params]

  def self.from_omniauth(auth)
    user = find_or_initialize_by(provider: auth.provider, uid: auth.uid)
    user.email = auth.info.email
    user.name = auth.info.name
    user.save!
    user
  end
end
