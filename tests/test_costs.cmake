# The seconds each longer test took in a recorded run of tools/test.sh (a
# fresh clone on the 2-core development machine, ctest -j2), as ctest's COST:
# ctest then starts the longest tests first. It orders by the times it
# recorded itself (build/*/Testing/Temporary/CTestCostData.txt) once it has
# them, but CI runs on a fresh clone, where it has none and would start the
# tests in declaration order, a long one last setting the phase's tail.
# Only the order depends on these numbers, so they need refreshing only when a
# test's time changes by much (docs/development.md, "Tests"). A test missing
# here costs 0: it runs after these, in declaration order.
set(_sb_costs_release
    runtime_split_invariance_test 42 model_gguf_model_test 37 bank_redis_cluster_test 31 server_remote_test 29
    server_hostile_load_test 27 runtime_batch_invariance_test 25 server_messages_client_test 25
    server_responses_e2e_test 25 engine_equivalence_test 24 server_cluster_test 24 server_qwen_code_test 24
    server_hostile_model_files_test 23 server_hostile_requests_test 22 server_haproxy_recipe_test 15
    bench_agents_test 15 server_qwen4exp_seed_test 14 server_constrained_decoding_test 13 server_load_test 11
    server_bank_page_test 11 server_hostile_readers_test 11 server_e2e_test 10 server_model_files_test 10
    server_constrained_isolation_test 8 server_hostile_pins_test 8 model_gguf_qwen4exp_test 7
    server_batching_test 7 run_logits_test 7 runtime_reference_test 6 tokenizer_js_identity_test 6
    engine_speculative_equivalence_test 6 engine_speculative_rejection_test 6 server_responses_equivalence_test 6
    tokenizer_chat_reference_test 5 engine_qsa_restore_test 5 engine_mtp_equivalence_test 5
    server_frameworks_test 5 server_speculative_test 5)
set(_sb_costs_address
    engine_test 16 model_qwen4exp_config_test 16 tokenizer_test 14 runtime_sampling_test 13 model_gen_model_test 13
    runtime_quant_matmul_test 9 runtime_sampling_rejection_test 9 model_verify_test 9 runtime_math_test 8
    runtime_kernels_test 6 bank_ssd_crash_test 6 engine_admission_test 5 model_fingerprint_test 4)
set(_sb_costs_thread
    engine_concurrency_test 19 engine_batching_equivalence_test 16 engine_admission_test 13 server_limits_test 6)

# sb_add_test (CMakeLists.txt) sets each listed test's COST as it adds it
# (set_tests_properties reaches only the tests of its own folder before
# CMake 3.28); tests/CMakeLists.txt checks that every name here is a test.
if(SB_SANITIZE STREQUAL "")
  set(SB_TEST_COSTS ${_sb_costs_release})
else()
  set(SB_TEST_COSTS ${_sb_costs_${SB_SANITIZE}})
endif()
