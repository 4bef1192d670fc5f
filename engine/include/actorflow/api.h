// What libactorflow exports. The library is built with hidden visibility
// (-fvisibility=hidden): only what a public header declares between AF_PUBLIC_BEGIN and
// AF_PUBLIC_END is in its dynamic symbol table. Every installed header wraps its
// declarations so; the internals (not installed) are not exported, and the tests that
// reach them link the library's objects (tests/CMakeLists.txt's actorflow_internals).
// AF_API exports one declaration that lives in an internal header but is used across a
// module boundary (libactorflow_cuda calls it).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define AF_PUBLIC_BEGIN _Pragma("GCC visibility push(default)")
#define AF_PUBLIC_END _Pragma("GCC visibility pop")
#define AF_API __attribute__((visibility("default")))
#else
#define AF_PUBLIC_BEGIN
#define AF_PUBLIC_END
#define AF_API
#endif
