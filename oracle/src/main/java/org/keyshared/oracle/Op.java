package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;

/** One request kind: its arguments in, a JSON-serialisable answer out. */
@FunctionalInterface
interface Op {
  Object apply(JsonNode args, Handles handles) throws Exception;
}
