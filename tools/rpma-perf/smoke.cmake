# smoke.cmake -- short loopback runs of each operation through rpma-perf; each must exit 0 and
# print one JSON object whose fields add up. Run: cmake -DPERF=path -DPORT=base -P smoke.cmake
if(NOT PERF OR NOT PORT)
  message(FATAL_ERROR "usage: cmake -DPERF=rpma-perf -DPORT=27300 -P smoke.cmake")
endif()

# "op size iodepth connections [extra args]"
set(RUNS
  "read 4096 4 1"
  "read 65536 8 2"
  "write 4096 4 1"
  "write 4096 4 1 --provider tcp"
  "write 1048576 2 1"
  "write-flush 8 1 1"
  "write-flush-persistent 4096 2 1"
  "atomic-write 8 4 1"
  "send 512 4 1"
  "send 8 1 1 --busy-poll"
  "write-imm 4096 4 2"
  "write 8 1 1 --busy-poll"
  "gpspm 8 1 1"
  "gpspm 4096 4 1 --busy-poll --server-mode wait"
  "send-recv 8 1 1 --server-mode poll"
  "send-recv 1000 4 2")

set(count 200)
set(port ${PORT})
foreach(spec IN LISTS RUNS)
  separate_arguments(run UNIX_COMMAND "${spec}")
  list(GET run 0 op)
  list(GET run 1 size)
  list(GET run 2 depth)
  list(GET run 3 conns)
  set(extra "")
  list(LENGTH run n)
  if(n GREATER 4)
    list(SUBLIST run 4 -1 extra)
  endif()
  set(cmd ${PERF} loopback --port ${port} --op ${op} --size ${size} --iodepth ${depth}
      --connections ${conns} --count ${count} --json ${extra})
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${op} ${size}: exit ${rc}\n${cmd}\nstdout: ${out}\nstderr: ${err}")
  endif()
  string(STRIP "${out}" out)
  string(JSON got_op ERROR_VARIABLE jerr GET "${out}" op)
  if(jerr)
    message(FATAL_ERROR "${op} ${size}: output is not the expected JSON (${jerr}):\n${out}")
  endif()
  string(JSON ops GET "${out}" ops)
  string(JSON bytes GET "${out}" bytes)
  string(JSON jsize GET "${out}" size)
  string(JSON verified GET "${out}" verified)
  string(JSON p50 GET "${out}" lat_us p50)
  string(JSON lmax GET "${out}" lat_us max)
  string(JSON ccpu GET "${out}" client_cpu_s)
  string(JSON scpu_type TYPE "${out}" server_cpu_s)
  string(JSON secs GET "${out}" seconds)
  math(EXPR want_ops "${count} * ${conns}")
  math(EXPR want_bytes "${want_ops} * ${jsize}")
  if(NOT got_op STREQUAL op OR NOT ops EQUAL want_ops OR NOT bytes EQUAL want_bytes
     OR NOT verified STREQUAL "ON" OR NOT scpu_type STREQUAL "NUMBER")
    message(FATAL_ERROR "${op} ${size}: inconsistent result:\n${out}")
  endif()
  if(p50 LESS_EQUAL 0 OR lmax LESS p50 OR secs LESS_EQUAL 0 OR ccpu LESS 0)
    message(FATAL_ERROR "${op} ${size}: insane numbers:\n${out}")
  endif()
  message(STATUS "ok: ${op} ${size} x${depth} x${conns} ${extra}: p50 ${p50} us, ${ops} ops")
endforeach()
