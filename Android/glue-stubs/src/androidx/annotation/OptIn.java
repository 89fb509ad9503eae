// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package androidx.annotation;

import java.lang.annotation.Annotation;

public @interface OptIn {
    Class<? extends Annotation>[] markerClass();
}
