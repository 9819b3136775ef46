package io.keyshared.spark;

import java.io.Serializable;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Expression;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A Catalyst expression written in Java as Scala writes a case class: its constructor's
 * arguments, in order, are the elements of its {@code Product}, and two expressions are equal
 * when they are of one class and their arguments are equal (an array's by its contents).
 * Catalyst reads the product to copy a tree and the equality to find repeated subexpressions
 * and to compare plans.
 *
 * <p>Each has one child, the key. It extends {@code Expression} rather than {@code
 * UnaryExpression}, whose final Scala bridge methods a Java subclass cannot satisfy.
 */
abstract class ProductExpression extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The constructor's arguments, in its order. */
  protected abstract Object[] fields();

  /** The key expression. */
  public abstract Expression child();

  @Override
  public final Seq<Expression> children() {
    return CollectionConverters.asScala(List.of(child())).toList();
  }

  @Override
  public final boolean foldable() {
    return child().foldable();
  }

  @Override
  public final int productArity() {
    return fields().length;
  }

  @Override
  public final Object productElement(int n) {
    Object[] fields = fields();
    if (n < 0 || n >= fields.length) {
      throw new IndexOutOfBoundsException(Integer.toString(n));
    }
    return fields[n];
  }

  @Override
  public final boolean canEqual(Object other) {
    return other != null && other.getClass() == getClass();
  }

  @Override
  public final boolean equals(Object other) {
    return canEqual(other) && Arrays.deepEquals(fields(), ((ProductExpression) other).fields());
  }

  @Override
  public final int hashCode() {
    return Arrays.deepHashCode(fields());
  }
}
