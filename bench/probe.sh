#!/usr/bin/env bash
# The attacker probe, re-run: every finding of the security reviews (issue 7's
# seven, issue 25's twelve, issue 35's eleven, issue 37's review of loopback nodes: two,
# issue 43's planted paths, journals, IPv6 localhost and churn; issue 55's links in
# earlier path components, a problem axis's analysis cost and workload memory)
# as the test that reproduces it, each run on
# its own and reported as held or BROKEN, in one table.
#
# Each test plays the attacker against the real binaries or the library and fails when the
# attack works (each was checked to fail without its fix: experiments/). Findings that need
# a second user (uid 65534) or namespaces run as root; as another user they say SKIPPED.
#
# Issue 25's finding 7 has no test of its own (its check is the one 25-1b exercises).
#
# Usage: bench/probe.sh            (release build; about 1.5 min here)
#        PROBE_FILTER=35- bench/probe.sh   only the findings whose label starts with 35
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export THROTTLE_REQUIRE_NETNS=${THROTTLE_REQUIRE_NETNS:-$([ "$(id -u)" = 0 ] && echo 1)}
cargo build --release --workspace -q || exit 2

# label | package | test binary (or "lib") | test name | what the attacker does
PROBES=$(cat <<'EOF_PROBES'
7-1|throttle-agent|security|job_names_cannot_reach_outside_the_job_directory|a job name with ../ reaches outside the job directory
7-2|throttle-agent|security|only_the_workloads_run_and_their_environment_is_filtered|a job starts the agent, a loader or a shell, or passes LD_* and friends
7-3|throttle-agent|security|the_token_stays_off_the_wire_and_the_data_port_relays_nothing|the token crosses the data port; a peer relays anywhere
7-3b|throttle-agent|security|a_peer_that_cannot_prove_the_token_gets_nothing|a peer that cannot prove the token gets a byte
7-4|throttle-agent|security|idle_connections_cannot_starve_the_agent|thousands of idle connections exhaust the agent
7-4b|throttle-agent|security|clients_without_the_token_cannot_hold_the_control_api|clients without the token hold the control API
7-5|throttle-agent|security|tiny_percentages_are_refused_and_do_not_stall_the_next_setting|a tiny percentage stalls the link
7-6|throttle-tests|run|a_killed_controller_leaves_no_job_behind|a killed controller orphans its job
7-6b|throttle-tests|sweep|a_resumed_sweep_removes_what_its_killed_predecessor_left|a killed sweep leaves its job for the next
7-7|throttle-tests|sweep|a_dead_node_fails_its_points_and_the_sweep_goes_on|one dead agent aborts the sweep
25-1|throttle-agent|agent_process|an_agent_does_not_start_while_someone_holds_its_ipv6_preload_port|another user squats [::1] of the preload port
25-1b|throttle-preload|lib|tests::a_listener_of_another_user_is_never_handed_a_connection|the library hands a connection to another user's listener
25-2|throttle-agent|agent_process|one_user_holds_at_most_a_share_of_the_preload_port|one user fills the preload port with idle connections
25-3|throttle-agent|security|a_flood_from_a_trusted_address_cannot_lock_out_clients_that_prove_themselves|a flood from the controller's host locks the controller out
25-3b|throttle-agent|lib|limits::tests::a_full_pool_evicts_its_oldest_unproven_connection_never_a_proven_one|a full pool evicts a proven connection
25-4|throttle-agent|security|forwards_reach_no_loopback_only_service_and_no_system_port_unless_opened|a forward reaches a loopback-only service or sshd
25-5|throttle-ctl|lib|cluster::local::tests::down_removes_only_what_up_made_and_kills_only_agents|local down deletes a user directory, kills an impostor
25-6|throttle-ctl|lib|cluster::tests::a_cluster_file_cannot_have_another_file_sent_as_its_token|a cluster file sends ~/.git-credentials as the token
25-8|throttle-agent|agent_process|a_socket_bound_to_loopback_cannot_pose_as_another_users_service|a loopback socket poses as another user's service
25-9|throttle-agent|agent_process|a_directory_entry_without_an_agent_is_not_intercepted|a directory entry captures traffic to a host outside the cluster
25-10|throttle-tests|command|a_controller_killed_outright_leaves_no_command_and_no_bandwidth_behind|a SIGKILLed controller leaves its command and bandwidth behind
25-10b|throttle-tests|command|the_guard_kills_the_marked_processes_and_nothing_else|the guard kills processes that are not the run's
25-11|throttle-agent|lib|launch::programs::tests::an_allowed_directory_never_yields_the_agent_the_controller_or_setuid|an allowed directory yields a modified agent copy
25-11b|throttle-agent|lib|launch::programs::tests::interpreters_in_an_allowed_directory_are_reported|a renamed interpreter in an allowed directory goes unnamed
25-12|throttle-ctl|lib|measurements::tests::a_hostile_stores_rows_are_refused_by_name_and_its_labels_cannot_drive_the_terminal|a store's rows and labels drive the analysis or the terminal
35-1|throttle-tests|shared_dirs|kept_logs_are_never_written_through_a_planted_link|local down --keep-logs writes through a planted link
35-2|throttle-tests|shared_dirs|a_state_directory_of_another_user_is_refused|local up puts the token in another user's directory
35-3|throttle-agent|security|a_forward_takes_no_loopback_port_of_this_machine|a forward squats another user's preload port
35-4|throttle-tests|shared_dirs|a_planted_cluster_file_gets_no_token|a planted cluster file sends a secret as the token
35-5|throttle-agent|lib|state::interception::tests::only_addresses_within_the_operators_blocks_are_captured|PUT /cluster adds an agent at a shared address to interception
35-5b|throttle-ctl|lib|external::tests::a_run_to_a_node_that_is_not_captured_is_refused|a run between nodes left outside interception passes unshaped
35-6|throttle-tests|shared_dirs|local_down_acts_only_for_the_cluster_file_local_up_wrote|a hand-written cluster file makes local down kill and remove
35-7|throttle-agent|lib|launch::programs::tests::programs_that_start_programs_run_only_when_named|timeout, nice, setsid, a script in an allowed directory run anything
35-8|throttle-ctl|lib|store::tests::exported_text_is_no_formula_and_no_control|export writes formulas and control characters into CSV
35-9|throttle-ctl|lib|store::tests::a_planted_link_is_no_database|--db follows a link planted in a shared directory
35-10|throttle-tests|command|a_controller_killed_outright_leaves_no_command_and_no_bandwidth_behind|children under env -i outlive a SIGKILLed controller
35-11a|throttle-agent|security|forwards_pointing_at_each_other_carry_nothing_round|two forwards chain a connection round and round
35-11b|throttle-agent|security|a_trickled_body_is_cut_off|a token holder trickles a body for 50 s
35-11c|throttle-ctl|lib|cluster::certs::tests::certificates_are_valid_for_a_bounded_time|local up --tls certificates valid 1975-4096
37-1|throttle-tests|loopback_nodes|localhost_is_never_another_users_listener|another user's listener at a loopback node's address takes what the node's program sends to 127.0.0.1
37-2|throttle-tests|loopback_nodes|localhost_is_the_nodes_server_not_another_users_listener|another user's 127.0.0.1 listener takes a node's localhost traffic from its own server
43-1|throttle-tests|loopback_nodes|ipv6_localhost_is_the_nodes_server_not_another_users_listener|another user's [::1] listener takes what a node's program sends to ::1
43-1b|throttle-preload|lib|node::tests::localhost_in_either_family_is_the_node|::1 is not the node's localhost
43-5|throttle-tests|loopback_nodes|a_misaddressed_connect_never_reaches_another_users_listener|a connect to localhost where only another node listens reaches another user's 127.0.0.1 listener
43-2|throttle-tests|shared_dirs|what_the_controller_writes_never_follows_a_planted_link|a report, an export or the demo's directory written through another user's planted link
43-2b|throttle-ctl|lib|shared_dir::tests::an_output_directory_is_ours_alone_or_refused|an output directory that is a link or writable by others is written into
43-4|throttle-tests|shared_dirs|a_planted_journal_adds_no_rows_and_a_fifo_is_no_store|another user's -wal beside a store adds rows; a FIFO as --db hangs
43-4b|throttle-ctl|lib|store::tests::a_planted_link_is_no_database|a store written in a sticky directory where a journal can be planted
43-3|throttle-agent|lib|limits::tests::churn_evicts_quiet_connections_before_one_with_its_request_waiting|churn evicts a client's connection whose request is waiting (bench/churn.sh measures the ports)
43-7a|throttle-ctl|lib|sweep::plan::tests::bad_specs_are_explained|retries or max_repeats of 4294967295, precision = nan accepted
43-7b|throttle-analysis|lib|analyze::tests::too_many_sizes_are_refused_at_once|a store of 5,000 sizes keeps analyze busy for minutes
43-7c|throttle-ctl|lib|store::tests::a_huge_cell_is_refused_by_row|a store of 30 MB cells takes gigabytes to read
43-7d|throttle-analysis|lib|table::tests::bidirectional_controls_are_written_out_everywhere|bidi controls in labels reorder what is shown
55-1|throttle-tests|shared_dirs|a_link_in_an_earlier_component_of_a_path_is_followed_only_when_safe|another user's link in an earlier component of an output path makes root write and create directories through it
55-1b|throttle-ctl|lib|shared_dir::tests::a_path_is_walked_one_component_at_a_time_trusting_only_safe_links|a link of one's own in a directory others may change is followed
55-2|throttle-analysis|lib|analyze::problem::tests::a_problem_axis_beyond_its_bounds_is_refused_at_once|a store of 32 x 32 (size, problem) cells keeps analyze busy for 15 minutes
55-2b|throttle-ctl|lib|sweep::plan::tests::a_sweep_its_analysis_would_refuse_is_refused_at_once|a sweep stores sizes its analysis then cannot answer in time
55-3|throttle-tests|run|bad_run_arguments_are_explained|a workload size whose parts fit one by one but not together brings the OOM killer
55-5|throttle-tests|cli|the_token_goes_only_to_an_agent_that_proves_it_holds_it|a copied cluster file's token_file sends a token-shaped secret to its control address, or through a relay
EOF_PROBES
)

held=0; broken=0; skipped=0
printf '%-7s %-8s %s\n' finding result "what the attacker does (test)"
while IFS='|' read -r label pkg bin name what; do
  [ -z "$label" ] && continue
  case "$label" in "${PROBE_FILTER:-}"*) ;; *) continue ;; esac
  if [ "$bin" = lib ]; then target=(--lib); else target=(--test "$bin"); fi
  out=$(cargo test --release -q -p "$pkg" "${target[@]}" -- --exact "$name" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    result=BROKEN; broken=$((broken + 1))
  elif grep -qi "skipped" <<<"$out" || ! grep -q "1 passed" <<<"$out"; then
    result=skipped; skipped=$((skipped + 1))
  else
    result=held; held=$((held + 1))
  fi
  printf '%-7s %-8s %s (%s)\n' "$label" "$result" "$what" "$name"
done <<<"$PROBES"
echo "held $held, BROKEN $broken, skipped $skipped"
[ $broken -eq 0 ]
