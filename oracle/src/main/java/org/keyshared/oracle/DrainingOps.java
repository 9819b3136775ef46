package org.keyshared.oracle;

import java.util.Map;

final class DrainingOps {
  private DrainingOps() {}

  static void register(Map<String, Op> ops) {}
}
