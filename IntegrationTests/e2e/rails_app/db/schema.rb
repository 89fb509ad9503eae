ActiveRecord::Schema.define(version: 2024_01_01_000000) do
  create_table "users", force: :cascade do |t|
    t.string "email", null: false, default: ""
    t.string "name"
    t.string "provider", null: false
    t.string "uid", null: false
    t.integer "sign_in_count", default: 0, null: false
    t.datetime "current_sign_in_at"
    t.datetime "last_sign_in_at"
    t.string "current_sign_in_ip"
    t.string "last_sign_in_ip"
    t.timestamps
    t.index ["provider", "uid"], unique: true
  end
end
