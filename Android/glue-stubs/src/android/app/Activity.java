// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package android.app;

import android.content.Context;
import android.content.Intent;

public class Activity extends Context {
    public void startActivity(Intent intent) { throw new UnsupportedOperationException("stub"); }
    public boolean isFinishing() { throw new UnsupportedOperationException("stub"); }
    public boolean isChangingConfigurations() { throw new UnsupportedOperationException("stub"); }
    public boolean isDestroyed() { throw new UnsupportedOperationException("stub"); }
}
