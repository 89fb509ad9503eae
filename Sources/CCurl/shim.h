// libcurl headers plus typed wrappers for what Swift cannot import: curl's option and info
// setters are C variadic functions, so each argument kind gets one fixed-signature wrapper.
// Every symbol is prefixed CCurl_.
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
#include <curl/curl.h>

// curl_easy_setopt is variadic: a `long` option (flags, timeouts, enums).
static inline CURLcode CCurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

// curl_easy_setopt is variadic: a `curl_off_t` option (the *_LARGE sizes).
static inline CURLcode CCurl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

// curl_easy_setopt is variadic: a `char *` option (libcurl copies it, except POSTFIELDS).
static inline CURLcode CCurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

// curl_easy_setopt is variadic: an opaque pointer option (callback userdata, error buffer, PRIVATE).
static inline CURLcode CCurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

// curl_easy_setopt is variadic: a `struct curl_slist *` option (HTTPHEADER).
static inline CURLcode CCurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

// curl_easy_setopt is variadic: a write-style callback (WRITEFUNCTION, HEADERFUNCTION).
static inline CURLcode CCurl_easy_setopt_callback_write(CURL *handle, CURLoption option, curl_write_callback value) {
    return curl_easy_setopt(handle, option, value);
}

// curl_easy_getinfo is variadic: a `long` result (RESPONSE_CODE, OS_ERRNO, NUM_CONNECTS).
static inline CURLcode CCurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

// curl_easy_getinfo is variadic: a `curl_off_t` result (the *_T sizes and times).
static inline CURLcode CCurl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

// curl_easy_getinfo is variadic: a pointer result (PRIVATE).
static inline CURLcode CCurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

// curl_multi_setopt is variadic: a `long` option (MAXCONNECTS, PIPELINING).
static inline CURLMcode CCurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

// curl_multi_setopt is variadic: an opaque pointer option (SOCKETDATA, TIMERDATA).
static inline CURLMcode CCurl_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

// curl_multi_setopt is variadic: the socket callback (SOCKETFUNCTION).
static inline CURLMcode CCurl_multi_setopt_callback_socket(CURLM *multi, curl_socket_callback value) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, value);
}

// curl_multi_setopt is variadic: the timer callback (TIMERFUNCTION).
static inline CURLMcode CCurl_multi_setopt_callback_timer(CURLM *multi, curl_multi_timer_callback value) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, value);
}

// CURL_GLOBAL_DEFAULT is a composite macro (an OR of other macros).
static const long CCurl_GLOBAL_DEFAULT = CURL_GLOBAL_DEFAULT;

// CURL_SOCKET_TIMEOUT is a macro aliasing another macro; re-exported with its C type.
static const curl_socket_t CCurl_SOCKET_TIMEOUT = CURL_SOCKET_TIMEOUT;

#endif
