// The native sign-in module as an Android library. NOT RUN HERE: this machine has no Android SDK,
// Gradle or Maven access; scripts/test-android compiles and tests the core (src/main/kotlin/.../core)
// and src/test with Debian's kotlinc and JUnit 5 instead. Versions are the ones the code was written
// against; any current Android Gradle Plugin and Kotlin work (the core is Kotlin 1.3 syntax).
plugins {
    id("com.android.library")
    id("org.jetbrains.kotlin.android")
}

android {
    namespace = "org.callbackproxy.nativesignin"
    compileSdk = 35
    defaultConfig {
        minSdk = 26            // java.util.Base64 in the core's PKCE (or enable core library desugaring)
    }
    sourceSets["main"].java.srcDirs("src/main/kotlin")
    // The contract tests read ../../Contract/native-sign-in-vectors.json with the JDK-only JSON reader.
    sourceSets["test"].java.srcDirs("src/test/kotlin", "../json/src/main/kotlin")
    testOptions.unitTests.all { it.useJUnitPlatform() }
}

dependencies {
    implementation("net.openid:appauth:0.11.1")
    implementation("androidx.activity:activity-ktx:1.9.3")
    implementation("androidx.browser:browser:1.9.0")     // setEphemeralBrowsingEnabled; AppAuth alone brings an older one
    testImplementation("org.junit.jupiter:junit-jupiter:5.9.2")
}
