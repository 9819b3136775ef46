package io.keyshared.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A keyshared function of a string or binary key as a native Catalyst expression, with
 * whole-stage code generation: the key's bytes are hashed where Spark holds them, without
 * copying or leaving the JVM.
 *
 * <p>The layout (ks_route only) and the null key's bytes are fixed when the expression is
 * built, at analysis, and travel inside the plan. A null key hashes as {@code nullKey} when
 * one is given, else fails the task with {@link KeysharedException#nullKey}.
 */
public final class KeyExpression extends ProductExpression {
  private static final long serialVersionUID = 1L;
  private static final String MURMUR = Murmur3.class.getName();

  private final Expression child;
  private final KeyFunction function;
  private final Router router;
  private final byte[] nullKey;

  public KeyExpression(Expression child, KeyFunction function, Router router, byte[] nullKey) {
    this.child = Objects.requireNonNull(child);
    this.function = Objects.requireNonNull(function);
    this.router = function.routes() ? Objects.requireNonNull(router) : null;
    this.nullKey = nullKey == null ? null : nullKey.clone();
  }

  public KeyFunction function() {
    return function;
  }

  @Override
  public Expression child() {
    return child;
  }

  @Override
  public DataType dataType() {
    return function.dataType();
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public String prettyName() {
    return function.sqlName();
  }

  @Override
  public scala.collection.Iterator<Object> flatArguments() {
    List<Object> shown = new ArrayList<>();
    shown.add(child);
    if (router != null) {
      shown.add(router.describe());
    }
    if (nullKey != null) {
      shown.add("null_key=" + nullKey.length + " bytes");
    }
    return CollectionConverters.asScala(shown.iterator());
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    DataType type = child.dataType();
    if (type instanceof StringType || type instanceof BinaryType) {
      return TypeCheckResult.TypeCheckSuccess$.MODULE$;
    }
    return new TypeCheckResult.TypeCheckFailure(
        KeysharedException.keyType(function.sqlName(), type.simpleString()));
  }

  private int hashOf(Object key) {
    if (key == null) {
      if (nullKey == null) {
        throw KeysharedException.nullKey(function.sqlName());
      }
      return Murmur3.hashBinary(nullKey);
    }
    return key instanceof UTF8String
        ? Murmur3.hashString((UTF8String) key)
        : Murmur3.hashBinary((byte[]) key);
  }

  @Override
  public Object eval(InternalRow input) {
    return function.value(hashOf(child.eval(input)), router);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    ExprCode key = child.genCode(ctx);
    String hash = ctx.freshName("keyHash");
    String hashKey =
        MURMUR
            + (child.dataType() instanceof BinaryType ? ".hashBinary(" : ".hashString(")
            + key.value()
            + ")";
    String onNull =
        nullKey == null
            ? "throw " + KeysharedException.class.getName() + ".nullKey(\"" + function.sqlName() + "\");"
            : hash + " = " + Murmur3.hashBinary(nullKey) + ";";
    String value =
        function.routes()
            ? ctx.addReferenceObj("ksRouter", router, Router.class.getName()) + ".route(" + hash + ")"
            : function.javaFormula(hash);
    String javaType = CodeGenerator.javaType(dataType());
    Seq<String> parts =
        CollectionConverters.asScala(
                Arrays.asList(
                    "\n",
                    "\nint " + hash + ";\nif (",
                    ") {\n  " + onNull + "\n} else {\n  " + hash + " = " + hashKey + ";\n}\n" + javaType + " ",
                    " = " + value + ";\n"))
            .toList();
    Seq<JavaCode> inputs =
        CollectionConverters.asScala(Arrays.<JavaCode>asList(key.code(), key.isNull(), ev.value()))
            .toList();
    return ev.copy(new CodeBlock(parts, inputs), FalseLiteral$.MODULE$, ev.value());
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> newChildren) {
    return new KeyExpression(newChildren.apply(0), function, router, nullKey);
  }

  @Override
  protected Object[] fields() {
    return new Object[] {child, function, router, nullKey};
  }
}
