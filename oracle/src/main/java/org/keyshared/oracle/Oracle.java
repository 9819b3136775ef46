package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import org.apache.pulsar.PulsarVersion;

/**
 * Answers line-delimited JSON requests on stdin by running Pulsar's own classes.
 *
 * <p>Request: {@code {"id": 7, "op": "selector.add", "args": {...}}}. Answer, one line each,
 * in order: {@code {"id": 7, "ok": true, "result": ...}} or {@code {"id": 7, "ok": false,
 * "error": "..."}}. A line that is not such a request gets an error answer with {@code "id":
 * null}; the process keeps serving until stdin closes. Stateful Pulsar objects live in a
 * {@link Handles} table: an op that makes one returns its handle, later ops name it.
 */
public final class Oracle {
  static final ObjectMapper JSON = new ObjectMapper();

  private Oracle() {}

  public static void main(String[] argv) throws Exception {
    // stdout carries answers only: Pulsar's own logging goes to stderr. Redirected before any
    // Pulsar class loads, since log4j's console appender keeps the stream it first sees.
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    System.setOut(System.err);
    Map<String, Op> ops = new TreeMap<>();
    Handles handles = new Handles();
    ops.put("version", (args, h) -> version(ops));
    ops.put("close", (args, h) -> h.close(Args.handle(args)));
    HashOps.register(ops);
    SelectorOps.register(ops);
    DrainingOps.register(ops);
    LoadBalanceOps.register(ops);
    PartitionerOps.register(ops);
    BenchOps.register(ops);
    registerScalableOps(ops);

    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      out.println(JSON.writeValueAsString(answer(line, ops, handles)));
      out.flush();
    }
    // stdin closed ends the session, whatever threads a Pulsar client left running.
    System.exit(0);
  }

  /** The scalable-topic ops, built only against a release that has those classes. */
  private static void registerScalableOps(Map<String, Op> ops) throws Exception {
    Class<?> scalable;
    try {
      scalable = Class.forName("org.keyshared.oracle.ScalableOps");
    } catch (ClassNotFoundException absent) {
      return;
    }
    scalable.getDeclaredMethod("register", Map.class).invoke(null, ops);
  }

  static ObjectNode answer(String line, Map<String, Op> ops, Handles handles) {
    ObjectNode reply = JSON.createObjectNode();
    JsonNode request;
    try {
      request = JSON.readTree(line);
    } catch (Exception e) {
      return fail(reply.putNull("id"), "bad request: not JSON: " + e.getMessage());
    }
    if (request == null || !request.isObject()) {
      return fail(reply.putNull("id"), "bad request: not a JSON object");
    }
    reply.set("id", request.path("id"));
    String name = request.path("op").asText("");
    Op op = ops.get(name);
    if (op == null) {
      return fail(reply, "bad request: unknown op '" + name + "'; ops are " + ops.keySet());
    }
    JsonNode args = request.path("args");
    try {
      Object result = op.apply(args.isObject() ? args : JSON.createObjectNode(), handles);
      reply.put("ok", true);
      reply.set("result", JSON.valueToTree(result));
      return reply;
    } catch (Throwable e) {
      return fail(reply, e.getClass().getSimpleName() + ": " + e.getMessage());
    }
  }

  private static ObjectNode fail(ObjectNode reply, String error) {
    reply.put("ok", false);
    reply.put("error", error);
    return reply;
  }

  private static Map<String, Object> version(Map<String, Op> ops) {
    return Map.of("pulsar_version", PulsarVersion.getVersion(), "ops", ops.keySet());
  }
}
