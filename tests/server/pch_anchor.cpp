// The one source of sb_server_test_pch, the library that carries the server
// tests' precompiled header (tests/server/CMakeLists.txt).
