package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Base64;

/** Reads request arguments, naming the argument that is missing or of the wrong type. */
final class Args {
  private Args() {}

  static JsonNode field(JsonNode args, String name) {
    JsonNode value = args.get(name);
    if (value == null || value.isNull()) {
      throw new IllegalArgumentException("args." + name + " is missing");
    }
    return value;
  }

  static long longValue(JsonNode args, String name) {
    JsonNode value = field(args, name);
    if (!value.isIntegralNumber() || !value.canConvertToLong()) {
      throw new IllegalArgumentException("args." + name + " must be an integer, got " + value);
    }
    return value.longValue();
  }

  static int intValue(JsonNode args, String name) {
    long value = longValue(args, name);
    if (value != (int) value) {
      throw new IllegalArgumentException("args." + name + " = " + value + " is not an int");
    }
    return (int) value;
  }

  static double doubleValue(JsonNode args, String name) {
    JsonNode value = field(args, name);
    if (!value.isNumber()) {
      throw new IllegalArgumentException("args." + name + " must be a number, got " + value);
    }
    return value.doubleValue();
  }

  static boolean boolValue(JsonNode args, String name) {
    JsonNode value = field(args, name);
    if (!value.isBoolean()) {
      throw new IllegalArgumentException("args." + name + " must be a boolean, got " + value);
    }
    return value.booleanValue();
  }

  static String text(JsonNode args, String name) {
    JsonNode value = field(args, name);
    if (!value.isTextual()) {
      throw new IllegalArgumentException("args." + name + " must be a string, got " + value);
    }
    return value.textValue();
  }

  static JsonNode array(JsonNode args, String name) {
    JsonNode value = field(args, name);
    if (!value.isArray()) {
      throw new IllegalArgumentException("args." + name + " must be an array, got " + value);
    }
    return value;
  }

  static int handle(JsonNode args) {
    return intValue(args, "handle");
  }

  /** A key given as {"b64": "..."} (any bytes) or a JSON string (its UTF-8 bytes). */
  static byte[] key(JsonNode value, String where) {
    if (value.isTextual()) {
      return value.textValue().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }
    if (value.isObject() && value.path("b64").isTextual()) {
      return Base64.getDecoder().decode(value.path("b64").textValue());
    }
    throw new IllegalArgumentException(where + " must be a string or {\"b64\": ...}, got " + value);
  }
}
