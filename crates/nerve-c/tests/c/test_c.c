/* A plain C11 test of the C ABI basics (no framework): contexts, nodes, QoS, publishing
 * through a loan, taking and releasing samples, status codes and messages, null,
 * released (double free) and wrong-kind handles, with the message type's struct, schema
 * and layout hash from its generated header (`nerve types gen-c`). Exits non-zero on the
 * first failure.
 *
 * It uses its own domain (from its process id) and a temporary state directory. */

#define _POSIX_C_SOURCE 200809L

#include <nerve.h>
#include <nerve/msgs/cmd_vel.h> /* nerve_msgs_CmdVel, NERVE_MSGS_CMD_VEL_SCHEMA, ... */
#include <nerve/msgs/twist.h>
#include <nerve/msgs/add_two_ints.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A Twist schema cut short after its type name: malformed. */
static const char TWIST_SCHEMA_PREFIX[] = "nerve-schema/1|type=" NERVE_MSGS_TWIST_TYPE_NAME "|";

static int failures = 0;
static char state_dir[] = "/tmp/nerve-c-test-XXXXXX";

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,      \
              __LINE__, #cond, nerve_last_error());                                 \
      ++failures;                                                                   \
      goto done;                                                                    \
    }                                                                               \
  } while (0)

#define CHECK_STATUS(call, want)                                                    \
  do {                                                                              \
    nerve_status_t got_ = (call);                                                   \
    if (got_ != (want)) {                                                           \
      fprintf(stderr, "%s:%d: %s returned %s, not %s (last error: %s)\n", __FILE__, \
              __LINE__, #call, nerve_status_name((int32_t)got_),                    \
              nerve_status_name((int32_t)(want)), nerve_last_error());              \
      ++failures;                                                                   \
      goto done;                                                                    \
    }                                                                               \
  } while (0)

/* A timer's user data: firings and whether the executor dropped it. */
typedef struct {
  int fired;
  int dropped;
} timer_user_t;

static int32_t on_tick(void* user, const nerve_tick_t* tick) {
  timer_user_t* u = (timer_user_t*)user;
  ++u->fired;
  return tick->count == (uint64_t)u->fired ? 0 : 1;
}

static void on_drop(void* user) { ++((timer_user_t*)user)->dropped; }

static int32_t failing_tick(void* user, const nerve_tick_t* tick) {
  (void)user;
  (void)tick;
  nerve_callback_fail("the C callback failed on purpose");
  return 1;
}

/* A multi-threaded executor's setup data: written on the worker, read after the spin
   returned (the workers were joined). */
typedef struct {
  nerve_mt_executor_t mt;
  int fired;
  int made_node;
  int dropped;
} mt_user_t;

static int32_t mt_tick(void* user, const nerve_tick_t* tick) {
  mt_user_t* u = (mt_user_t*)user;
  (void)tick;
  ++u->fired;
  /* stops every worker, from this worker */
  return nerve_mt_executor_stop(u->mt) == NERVE_OK ? 0 : 1;
}

static int32_t mt_setup(void* user, nerve_context_t ctx, nerve_executor_t exec) {
  mt_user_t* u = (mt_user_t*)user;
  nerve_node_t node = {0};
  nerve_timer_t timer = {0};
  if (nerve_node_create(ctx, "c_mt_node", &node) == NERVE_OK) u->made_node = 1;
  (void)nerve_node_destroy(node);
  if (nerve_executor_add_timer(exec, "c_mt_tick", 1000000, mt_tick, user, NULL, &timer) != NERVE_OK) return 1;
  return nerve_timer_destroy(timer) == NERVE_OK ? 0 : 1;
}

static int32_t mt_failing_setup(void* user, nerve_context_t ctx, nerve_executor_t exec) {
  (void)user;
  (void)ctx;
  (void)exec;
  nerve_callback_fail("the C setup failed on purpose");
  return 1;
}

static void mt_drop(void* user) { ++((mt_user_t*)user)->dropped; }

static void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", state_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", state_dir);
}

int main(void) {
  nerve_context_t ctx = {0};
  nerve_node_t node = {0};
  nerve_publisher_t pub = {0};
  nerve_subscriber_t sub = {0};
  nerve_loan_t loan = {0};
  nerve_sample_t sample = {0};
  nerve_sample_view_t view;
  nerve_qos_t qos;
  void* data = NULL;
  char name[128];
  char topic[64];
  size_t needed = 0;
  size_t live_before = nerve_live_handles();

  if (mkdtemp(state_dir) == NULL) {
    perror("mkdtemp");
    return 2;
  }
  atexit(cleanup);

  /* status names and the empty error */
  CHECK(strcmp(nerve_status_name(NERVE_OK), "NERVE_OK") == 0);
  CHECK(strcmp(nerve_status_name(NERVE_ERR_STALE_HANDLE), "NERVE_ERR_STALE_HANDLE") == 0);
  CHECK(strcmp(nerve_status_name(-1), "(unknown status)") == 0);

  /* a context with options */
  {
    nerve_context_options_t opts;
    uint32_t domain = 0;
    memset(&opts, 0, sizeof opts);
    opts.set_domain = true;
    opts.domain = 1 + (uint32_t)getpid() % 999;
    opts.state_dir = state_dir;
    opts.network = 0;
    CHECK_STATUS(nerve_context_create(&opts, &ctx), NERVE_OK);
    CHECK_STATUS(nerve_context_domain(ctx, &domain), NERVE_OK);
    CHECK(domain == opts.domain);
    CHECK_STATUS(nerve_context_domain(ctx, NULL), NERVE_ERR_NULL);
    CHECK(strstr(nerve_last_error(), "out_domain") != NULL);

    /* a bad domain fails with a message */
    {
      nerve_context_t bad = {0};
      opts.domain = 100000;
      CHECK_STATUS(nerve_context_create(&opts, &bad), NERVE_ERR_CONTEXT);
      CHECK(strlen(nerve_last_error()) > 0);
      CHECK(bad.id == 0);
    }
    opts.network = 7;
    opts.domain = 1;
    {
      nerve_context_t bad = {0};
      CHECK_STATUS(nerve_context_create(&opts, &bad), NERVE_ERR_INVALID_ARGUMENT);
    }
  }

  /* a node and its name (too small a buffer reports the size needed) */
  CHECK_STATUS(nerve_node_create(ctx, "c_test", &node), NERVE_OK);
  CHECK_STATUS(nerve_node_name(node, name, 2, &needed), NERVE_ERR_BUFFER_TOO_SMALL);
  CHECK(needed > 2);
  CHECK_STATUS(nerve_node_name(node, name, sizeof name, &needed), NERVE_OK);
  CHECK(strstr(name, "c_test") != NULL);
  CHECK(strlen(name) + 1 == needed);
  CHECK_STATUS(nerve_node_create(ctx, "bad name", &(nerve_node_t){0}), NERVE_ERR_NODE);

  /* robot time of the context and of the node (the system clock here) */
  {
    int64_t t_ctx = 0, t_node = 0;
    CHECK_STATUS(nerve_context_now(ctx, &t_ctx), NERVE_OK);
    CHECK_STATUS(nerve_node_now(node, &t_node), NERVE_OK);
    CHECK(t_ctx > 0 && t_node >= t_ctx);
    CHECK_STATUS(nerve_context_now(ctx, NULL), NERVE_ERR_NULL);
    bool sim = true;
    CHECK_STATUS(nerve_context_sim_time(ctx, &sim), NERVE_OK);
    CHECK(!sim);
  }

  /* a call without a server fails with its own code, and the codes are named */
  {
    nerve_service_type_t ty = NERVE_MSGS_ADD_TWO_INTS_SERVICE_TYPE_INIT;
    nerve_client_t client = {0};
    char service[64];
    snprintf(service, sizeof service, "/c_nobody_%d", (int)getpid());
    CHECK_STATUS(nerve_client_create(node, service, &ty, &client), NERVE_OK);
    nerve_msgs_TwoInts req = {1, 2};
    nerve_reply_t reply = {0};
    nerve_sample_view_t v;
    CHECK_STATUS(nerve_client_call(client, &req, sizeof req, 1000000000ULL, &reply, &v), NERVE_ERR_NO_SERVER);
    CHECK(strstr(nerve_last_error(), "no server") != NULL);
    CHECK(strcmp(nerve_status_name(NERVE_ERR_NO_SERVER), "NERVE_ERR_NO_SERVER") == 0);
    CHECK(strcmp(nerve_status_name(NERVE_ERR_TOO_MANY_IN_FLIGHT), "NERVE_ERR_TOO_MANY_IN_FLIGHT") == 0);
    CHECK_STATUS(nerve_client_destroy(client), NERVE_OK);
  }

  /* QoS presets */
  nerve_qos_default(&qos);
  CHECK(qos.depth == 4 && !qos.reliable);
  nerve_qos_reliable(&qos);
  CHECK(qos.reliable);
  nerve_qos_default(NULL); /* ignored */

  /* the generated macros: the schema of the type they name, the struct's size */
  CHECK(strstr(NERVE_MSGS_CMD_VEL_SCHEMA, "|type=" NERVE_MSGS_CMD_VEL_TYPE_NAME "|") != NULL);
  CHECK(sizeof(nerve_msgs_CmdVel) == NERVE_MSGS_CMD_VEL_HEAD_SIZE);
  CHECK(strncmp(NERVE_MSGS_TWIST_SCHEMA, TWIST_SCHEMA_PREFIX, strlen(TWIST_SCHEMA_PREFIX)) == 0);

  /* a publisher and a subscriber of CmdVel */
  snprintf(topic, sizeof topic, "/c_test_%d", (int)getpid());
  CHECK_STATUS(nerve_publisher_create(node, topic, NERVE_MSGS_CMD_VEL_SCHEMA, NERVE_MSGS_CMD_VEL_LAYOUT_HASH,
                                      &qos, &pub),
               NERVE_OK);
  CHECK_STATUS(nerve_subscriber_create(node, topic, NERVE_MSGS_CMD_VEL_SCHEMA, NERVE_MSGS_CMD_VEL_LAYOUT_HASH,
                                       &qos, &sub),
               NERVE_OK);
  CHECK_STATUS(nerve_publisher_wait_for_subscribers(pub, 1, 5000000000ULL), NERVE_OK);
  {
    size_t n = 0;
    CHECK_STATUS(nerve_publisher_subscriber_count(pub, &n), NERVE_OK);
    CHECK(n == 1);
  }

  /* the wrong layout hash, a malformed schema */
  {
    nerve_publisher_t p = {0};
    CHECK_STATUS(nerve_publisher_create(node, topic, NERVE_MSGS_CMD_VEL_SCHEMA,
                                        NERVE_MSGS_CMD_VEL_LAYOUT_HASH + 1, NULL, &p),
                 NERVE_ERR_TYPE_MISMATCH);
    CHECK(strstr(nerve_last_error(), "nerve_msgs/CmdVel") != NULL);
    CHECK_STATUS(nerve_publisher_create(node, topic, TWIST_SCHEMA_PREFIX, 0, NULL, &p), NERVE_ERR_SCHEMA);
    CHECK_STATUS(nerve_publisher_create(node, topic, NULL, 0, NULL, &p), NERVE_ERR_NULL);
  }

  /* publish through a loan */
  CHECK_STATUS(nerve_publisher_loan(pub, sizeof(nerve_msgs_CmdVel), &loan, &data), NERVE_OK);
  CHECK(data != NULL);
  CHECK(((uintptr_t)data) % 8 == 0);
  CHECK(((nerve_msgs_CmdVel*)data)->linear == 0.0f); /* zeroed head */
  ((nerve_msgs_CmdVel*)data)->linear = 1.25f;
  CHECK_STATUS(nerve_sample_send(loan), NERVE_OK);
  /* the loan is used up: sending it again is a stale handle */
  CHECK_STATUS(nerve_sample_send(loan), NERVE_ERR_STALE_HANDLE);
  CHECK(strstr(nerve_last_error(), "no longer valid") != NULL);
  CHECK_STATUS(nerve_loan_discard(loan), NERVE_ERR_STALE_HANDLE);

  /* a copy */
  {
    nerve_msgs_CmdVel m;
    memset(&m, 0, sizeof m);
    m.angular = -2.0f;
    CHECK_STATUS(nerve_publisher_publish(pub, &m, sizeof m), NERVE_OK);
    CHECK_STATUS(nerve_publisher_publish(pub, &m, 3), NERVE_ERR_TYPE_MISMATCH); /* not a CmdVel: a payload size that does not fit the type */
  }

  /* take both */
  CHECK_STATUS(nerve_subscriber_take(sub, 5000000000LL, &sample, &view), NERVE_OK);
  CHECK(view.len == sizeof(nerve_msgs_CmdVel));
  CHECK(view.seq == 1);
  CHECK(((const nerve_msgs_CmdVel*)view.data)->linear == 1.25f);
  {
    nerve_sample_view_t again;
    CHECK_STATUS(nerve_sample_view(sample, &again), NERVE_OK);
    CHECK(again.data == view.data && again.seq == 1);
  }
  CHECK_STATUS(nerve_sample_release(sample), NERVE_OK);
  /* double free */
  CHECK_STATUS(nerve_sample_release(sample), NERVE_ERR_STALE_HANDLE);
  CHECK(strstr(nerve_last_error(), "sample") != NULL);
  CHECK_STATUS(nerve_sample_view(sample, &view), NERVE_ERR_STALE_HANDLE);

  CHECK_STATUS(nerve_subscriber_take(sub, 5000000000LL, &sample, &view), NERVE_OK);
  CHECK(view.seq == 2);
  CHECK(((const nerve_msgs_CmdVel*)view.data)->angular == -2.0f);
  /* the sample outlives its subscriber */
  CHECK_STATUS(nerve_subscriber_destroy(sub), NERVE_OK);
  CHECK_STATUS(nerve_subscriber_destroy(sub), NERVE_ERR_STALE_HANDLE);
  CHECK(((const nerve_msgs_CmdVel*)view.data)->angular == -2.0f);
  CHECK_STATUS(nerve_sample_release(sample), NERVE_OK);
  sub.id = 0;

  /* nothing queued */
  CHECK_STATUS(nerve_subscriber_create(node, topic, NULL, 0, NULL, &sub), NERVE_OK); /* the topic's own type */
  CHECK_STATUS(nerve_subscriber_take(sub, 0, &sample, &view), NERVE_NOTHING);
  CHECK_STATUS(nerve_subscriber_take(sub, 1000000, &sample, &view), NERVE_NOTHING);

  /* null and wrong-kind handles */
  {
    nerve_publisher_t null_pub = {0};
    nerve_publisher_t as_pub;
    size_t n = 0;
    CHECK_STATUS(nerve_publisher_publish(null_pub, &n, sizeof n), NERVE_ERR_BAD_HANDLE);
    CHECK(strstr(nerve_last_error(), "null") != NULL);
    as_pub.id = node.id;
    CHECK_STATUS(nerve_publisher_subscriber_count(as_pub, &n), NERVE_ERR_WRONG_KIND);
    CHECK(strstr(nerve_last_error(), "node handle") != NULL);
    CHECK_STATUS(nerve_publisher_subscriber_count(pub, NULL), NERVE_ERR_NULL);
    as_pub.id = 0xFF00000000000001ULL; /* never issued */
    CHECK_STATUS(nerve_publisher_subscriber_count(as_pub, &n), NERVE_ERR_BAD_HANDLE);
  }

  /* the executor with timers written in C */
  {
    nerve_executor_t exec = {0};
    nerve_timer_t timer = {0}, failing = {0};
    timer_user_t user = {0, 0};
    uint64_t fired = 0;
    size_t ran = 0;
    int round;
    CHECK_STATUS(nerve_executor_create(ctx, &exec), NERVE_OK);
    CHECK_STATUS(nerve_executor_spin_once(exec, 0, &ran), NERVE_OK);
    CHECK(ran == 0);
    CHECK_STATUS(nerve_executor_add_timer(exec, "c_timer", 1000000, on_tick, &user, on_drop, &timer), NERVE_OK);
    CHECK(user.dropped == 0); /* the executor holds the user data until it is destroyed */
    for (round = 0; round < 2000 && user.fired < 3; ++round)
      CHECK_STATUS(nerve_executor_spin_once(exec, 10000000, &ran), NERVE_OK);
    CHECK(user.fired >= 3);
    CHECK_STATUS(nerve_timer_counts(timer, &fired, NULL), NERVE_OK);
    CHECK(fired == (uint64_t)user.fired);
    CHECK_STATUS(nerve_timer_cancel(timer), NERVE_OK);
    CHECK_STATUS(nerve_executor_add_timer(exec, "c_zero", 0, on_tick, &user, NULL, &failing),
                 NERVE_ERR_INVALID_ARGUMENT);
    /* a failing callback ends the spin with its message */
    CHECK_STATUS(nerve_executor_add_one_shot(exec, "c_fail", 1000000, failing_tick, NULL, NULL, &failing),
                 NERVE_OK);
    {
      nerve_status_t s = NERVE_OK;
      for (round = 0; round < 2000 && s == NERVE_OK; ++round) s = nerve_executor_spin_once(exec, 10000000, &ran);
      CHECK(s == NERVE_ERR_CALLBACK);
      CHECK(strstr(nerve_last_error(), "failed on purpose") != NULL);
    }
    CHECK_STATUS(nerve_timer_destroy(failing), NERVE_OK);
    CHECK_STATUS(nerve_timer_destroy(timer), NERVE_OK);
    CHECK_STATUS(nerve_timer_destroy(timer), NERVE_ERR_STALE_HANDLE);
    CHECK(user.dropped == 0);
    CHECK_STATUS(nerve_executor_destroy(exec), NERVE_OK);
    CHECK(user.dropped == 1); /* dropped once, with the executor */
    CHECK_STATUS(nerve_executor_destroy(exec), NERVE_ERR_STALE_HANDLE);
  }

  /* a multi-threaded executor: a setup runs on a worker with a context and that
     worker's executor; its timer stops the executor from the worker; a failing setup's
     message reaches spin */
  {
    nerve_context_options_t opts;
    nerve_mt_executor_t mt = {0};
    nerve_callback_group_t group = {0};
    mt_user_t u;
    memset(&opts, 0, sizeof opts);
    memset(&u, 0, sizeof u);
    opts.set_domain = true;
    opts.domain = 1 + (uint32_t)getpid() % 999;
    opts.state_dir = state_dir;
    opts.network = 0;
    CHECK_STATUS(nerve_mt_executor_create(2, &opts, &mt), NERVE_OK);
    u.mt = mt;
    CHECK_STATUS(nerve_mt_executor_group(mt, NERVE_GROUP_MUTUALLY_EXCLUSIVE, &group), NERVE_OK);
    CHECK_STATUS(nerve_mt_executor_add(mt, group, mt_setup, &u, mt_drop), NERVE_OK);
    CHECK_STATUS(nerve_mt_executor_spin(mt, 10000000), NERVE_OK);
    CHECK(u.made_node == 1);
    CHECK(u.fired >= 1);
    CHECK(u.dropped == 1); /* after the setup ran, on the worker */
    CHECK_STATUS(nerve_mt_executor_destroy(mt), NERVE_OK);
    CHECK_STATUS(nerve_mt_executor_destroy(mt), NERVE_ERR_STALE_HANDLE);

    CHECK_STATUS(nerve_mt_executor_create(1, &opts, &mt), NERVE_OK);
    CHECK_STATUS(nerve_mt_executor_group(mt, NERVE_GROUP_REENTRANT, &group), NERVE_OK);
    CHECK_STATUS(nerve_mt_executor_add(mt, group, mt_failing_setup, NULL, NULL), NERVE_OK);
    CHECK_STATUS(nerve_mt_executor_spin(mt, 10000000), NERVE_ERR_CALLBACK);
    CHECK(strstr(nerve_last_error(), "failed on purpose") != NULL);
    CHECK_STATUS(nerve_mt_executor_destroy(mt), NERVE_OK);
  }

  /* release everything; a second destroy is stale */
  CHECK_STATUS(nerve_subscriber_destroy(sub), NERVE_OK);
  CHECK_STATUS(nerve_publisher_destroy(pub), NERVE_OK);
  CHECK_STATUS(nerve_publisher_destroy(pub), NERVE_ERR_STALE_HANDLE);
  CHECK_STATUS(nerve_node_destroy(node), NERVE_OK);
  CHECK_STATUS(nerve_node_destroy(node), NERVE_ERR_STALE_HANDLE);
  CHECK_STATUS(nerve_context_destroy(ctx), NERVE_OK);
  CHECK_STATUS(nerve_context_destroy(ctx), NERVE_ERR_STALE_HANDLE);
  CHECK(nerve_live_handles() == live_before);

done:
  if (failures == 0) {
    printf("nerve C ABI test: all checks passed\n");
    return 0;
  }
  fprintf(stderr, "nerve C ABI test: %d failure(s)\n", failures);
  return 1;
}
