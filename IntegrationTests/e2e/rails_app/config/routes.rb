Rails.application.routes.draw do
  devise_for :users, controllers: { omniauth_callbacks: "users/omniauth_callbacks" }
  devise_scope :user do
    delete "/users/sign_out", to: "devise/sessions#destroy", as: :destroy_user_session
  end
  get "/downloads/:name", to: "downloads#show", constraints: { name: %r{[^/]+} }
  root "home#index"
end
