# A private download, as an app serves one with send_file (an invoice, an export, an Active
# Storage blob): the file lives outside public/, under storage/downloads. With
# config.action_dispatch.x_sendfile_header = "X-Accel-Redirect", Rack::Sendfile answers with an
# empty body and the header when the front server says where its internal location is
# (X-Accel-Mapping), and with the bytes otherwise.
class DownloadsController < ApplicationController
  def show
    name = File.basename(params[:name].to_s)
    path = Rails.root.join("storage", "downloads", name)
    return head(:not_found) unless File.file?(path)

    send_file path, filename: "report-#{name}", disposition: "attachment", type: "application/octet-stream"
  end
end
