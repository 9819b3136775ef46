package org.keyshared.oracle;

import java.util.Map;

final class ScalableOps {
  private ScalableOps() {}

  static void register(Map<String, Op> ops) {}
}
