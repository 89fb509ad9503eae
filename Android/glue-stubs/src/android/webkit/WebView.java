// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.webkit;

import androidx.annotation.NonNull;

public class WebView {
    public void loadUrl(@NonNull String url) { throw new UnsupportedOperationException("stub"); }
}
