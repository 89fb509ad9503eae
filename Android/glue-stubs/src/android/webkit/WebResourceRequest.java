// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.webkit;

import android.net.Uri;

public interface WebResourceRequest {
    Uri getUrl();
    boolean isForMainFrame();
}
