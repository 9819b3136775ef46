package org.keyshared.oracle;

import java.util.Map;

final class SelectorOps {
  private SelectorOps() {}

  static void register(Map<String, Op> ops) {}
}
