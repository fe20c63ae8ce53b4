/* Helpers of the C API tests, in the common subset of C11 and C++20: checks that print where they failed,
 * the reference run of the `aerie` command, and a request read to its end. */
#ifndef AERIE_CAPI_TEST_UTIL_H
#define AERIE_CAPI_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aerie.h"

static int g_failures = 0;

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);          \
      ++g_failures;                                                                     \
    }                                                                                   \
  } while (0)

/* A call that must succeed; on failure prints the status and message and ends the test (what follows would
 * only cascade). */
#define REQUIRE_OK(call)                                                                                \
  do {                                                                                                  \
    aerie_status s_ = (call);                                                                           \
    if (s_ != AERIE_OK) {                                                                               \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, aerie_status_name(s_),        \
              aerie_last_error());                                                                      \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)

/* A call that must fail with `status` and a message containing `needle`. */
#define CHECK_FAILS(call, status, needle)                                                                 \
  do {                                                                                                    \
    aerie_status s_ = (call);                                                                             \
    if (s_ != (status) || strstr(aerie_last_error(), (needle)) == NULL) {                                 \
      fprintf(stderr, "%s:%d: %s -> %s \"%s\"; expected %s with \"%s\"\n", __FILE__, __LINE__, #call,    \
              aerie_status_name(s_), aerie_last_error(), aerie_status_name(status), (needle));            \
      ++g_failures;                                                                                       \
    }                                                                                                     \
  } while (0)

enum { kMaxIds = 4096 };

/* Parses the integers of the first list after `"key"` in the JSON text `json` into out (at most `max`);
 * returns how many, or -1 when there is no such key. */
static int json_ints(const char* json, const char* key, int32_t* out, int max) {
  char quoted[64];
  snprintf(quoted, sizeof(quoted), "\"%s\"", key);
  const char* p = strstr(json, quoted);
  if (!p || !(p = strchr(p, '['))) return -1;
  ++p;
  int count = 0;
  while (count < max) {
    char* end = NULL;
    const long value = strtol(p, &end, 10);
    if (end == p) break; /* ']' (after any white space) */
    out[count++] = (int32_t)value;
    p = end;
    while (*p == ' ' || *p == '\n' || *p == ',') ++p;
  }
  return count;
}

/* Runs `command` (an `aerie generate --json` line) and parses the integers of its output's "ids" list into
 * ids; returns how many, or -1 when the command failed or printed no list. */
static int reference_ids(const char* command, int32_t* ids) {
  FILE* pipe = popen(command, "r");
  if (!pipe) return -1;
  static char out[1 << 20];
  size_t n = fread(out, 1, sizeof(out) - 1, pipe);
  out[n] = '\0';
  if (pclose(pipe) != 0) {
    fprintf(stderr, "reference command failed: %s\n%s\n", command, out);
    return -1;
  }
  return json_ints(out, "ids", ids, kMaxIds);
}

/* What a pulled request produced: its ids, text and last event's figures. */
typedef struct collected {
  int32_t ids[kMaxIds];
  size_t n_ids;
  char text[1 << 16];
  size_t text_length;
  int n_events;
  aerie_event last; /* its pointers are not kept */
} collected;

/* Pulls every event of request `id` (waiting as long as it takes), then releases it. */
static void collect(aerie_engine* engine, uint64_t id, collected* out) {
  memset(out, 0, sizeof(*out));
  for (;;) {
    aerie_event e;
    REQUIRE_OK(aerie_request_next_event(engine, id, -1, &e));
    CHECK(e.request_id == id);
    ++out->n_events;
    for (size_t i = 0; i < e.n_tokens && out->n_ids < kMaxIds; ++i) out->ids[out->n_ids++] = e.tokens[i];
    CHECK(strlen(e.text) == e.text_length);
    if (out->text_length + e.text_length < sizeof(out->text)) {
      memcpy(out->text + out->text_length, e.text, e.text_length + 1);
      out->text_length += e.text_length;
    }
    if (e.finished) {
      out->last = e;
      out->last.tokens = NULL;
      out->last.text = NULL;
      out->last.error = NULL;
      if (e.finish_reason == AERIE_FINISH_ERROR)
        fprintf(stderr, "request %llu failed: %s\n", (unsigned long long)id, e.error);
      break;
    }
  }
  REQUIRE_OK(aerie_request_release(engine, id));
}

static int same_ids(const int32_t* a, size_t n_a, const int32_t* b, size_t n_b) {
  return n_a == n_b && (n_a == 0 || memcmp(a, b, n_a * sizeof(int32_t)) == 0);
}

#endif /* AERIE_CAPI_TEST_UTIL_H */
