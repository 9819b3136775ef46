package org.keyshared.oracle;

import java.util.Map;

final class HashOps {
  private HashOps() {}

  static void register(Map<String, Op> ops) {}
}
