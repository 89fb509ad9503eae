// STUB, declarations only: for the glue's compile check in scripts/test-android (Android/glue-stubs/README.md).
package net.openid.appauth;

public final class ResponseTypeValues {
    public static final String CODE = "code";
}
