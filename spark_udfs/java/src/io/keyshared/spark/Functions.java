package io.keyshared.spark;

import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Function1;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The keyshared functions for SQL: how each is built from its arguments, and their registration
 * in a session (by {@link KeysharedExtensions} at session start, or by {@link #register} on a
 * running session, which is what {@code spark_udfs.register(spark, layout)} calls).
 *
 * <p>SQL forms: {@code ks_key_hash(key [, null_key])}, likewise {@code ks_segment_hash},
 * {@code ks_bucket_hash} and {@code ks_sticky_key_hash}, and {@code ks_route(key [, layout [,
 * null_key]])}, and {@code ks_partition(key, num_partitions, partitioner)}
 * ({@link PartitionExpression}). {@code layout} is a layout JSON literal; without it (or as NULL) ks_route routes
 * under the layout of the Spark conf {@value #LAYOUT_CONF}, else one segment of 4 buckets.
 * A layout JSON without a {@code pulsar_version} routes as the release of the conf
 * {@value #VERSION_CONF} does (master when unset).
 * {@code null_key} is a string or binary literal hashed in place of a null key.
 */
public final class Functions {
  /** The Spark conf holding the layout JSON that ks_route uses without a layout argument. */
  public static final String LAYOUT_CONF = "spark.keyshared.layout";
  /** The Spark conf naming the release ks_route routes as, where the layout names none. */
  public static final String VERSION_CONF = "spark.keyshared.pulsarVersion";

  private Functions() {}

  /** The functions' builders with defaults for their optional arguments. */
  static final class Defaults {
    final Router layout;
    final byte[] nullKey;

    /** {@code layout} null means: the conf's layout at each query, else the default. */
    Defaults(Router layout, byte[] nullKey) {
      this.layout = layout;
      this.nullKey = nullKey;
    }

    Expression build(KeyFunction function, List<Expression> args) {
      int most = function.routes() ? 3 : 2;
      if (args.isEmpty() || args.size() > most) {
        throw new KeysharedException(
            function.sqlName() + " takes 1 to " + most + " arguments, got " + args.size());
      }
      Router router = null;
      int nullKeyAt = 1;
      if (function.routes()) {
        String json = args.size() > 1 ? literalString(function, args.get(1), "layout") : null;
        router = json != null ? Router.parse(json, confVersion()) : layout != null ? layout : confLayout();
        nullKeyAt = 2;
      }
      byte[] nullBytes = args.size() > nullKeyAt ? literalBytes(function, args.get(nullKeyAt)) : nullKey;
      return new KeyExpression(args.get(0), function, router, nullBytes);
    }

    Function1<Seq<Expression>, Expression> builder(KeyFunction function) {
      return args -> build(function, CollectionConverters.asJava(args));
    }
  }

  /**
   * The layout of the session's {@value #LAYOUT_CONF}, else the default one. Read when a query
   * is analysed (a function built without a layout), so that a malformed conf fails the query
   * there, naming the conf as the library does ({@code spark_udfs.udfs.conf_layout}).
   */
  public static Router confLayout() {
    String json = SQLConf.get().getConfString(LAYOUT_CONF, null);
    String version = confVersion();
    if (json == null || json.isBlank()) {
      return Router.defaultFor(version);
    }
    try {
      return Router.parse(json, version);
    } catch (KeysharedException e) {
      throw new KeysharedException(LAYOUT_CONF + ": " + e.getMessage());
    }
  }

  /** The release of the session's {@value #VERSION_CONF}, else master. */
  public static String confVersion() {
    String version = SQLConf.get().getConfString(VERSION_CONF, null);
    if (version == null || version.isBlank()) {
      return Router.MASTER;
    }
    // Checked here so that a bad conf names itself rather than the layout.
    Router.lowHalf(version, VERSION_CONF);
    return version;
  }

  private static Object literal(KeyFunction function, Expression arg, String what) {
    if (!arg.foldable()) {
      throw new KeysharedException(
          function.sqlName() + ": " + what + " must be a constant, not " + arg.sql());
    }
    return arg.eval(null);
  }

  private static String literalString(KeyFunction function, Expression arg, String what) {
    Object value = literal(function, arg, what);
    if (value != null && !(arg.dataType() instanceof StringType)) {
      throw new KeysharedException(
          function.sqlName() + ": " + what + " must be a JSON string, got " + arg.dataType().simpleString());
    }
    return value == null ? null : value.toString();
  }

  private static byte[] literalBytes(KeyFunction function, Expression arg) {
    Object value = literal(function, arg, "null_key");
    if (value == null) {
      return null;
    }
    if (arg.dataType() instanceof StringType) {
      return ((UTF8String) value).getBytes();
    }
    if (arg.dataType() instanceof BinaryType) {
      return (byte[]) value;
    }
    throw new KeysharedException(
        function.sqlName() + ": null_key must be a string or binary, got " + arg.dataType().simpleString());
  }

  static ExpressionInfo info(KeyFunction function) {
    return new ExpressionInfo(
        KeyExpression.class.getName(), null, function.sqlName(), function.usage(), "", "", "", "",
        "", "", "java_udf");
  }

  /**
   * Registers every function in {@code spark} as a temporary function (replacing one of the
   * same name), with ks_route routing under {@code layoutJson} (null: the conf's or the default
   * layout) and null keys hashed as {@code nullKey} (null: a null key fails the task).
   */
  public static void register(SparkSession spark, String layoutJson, byte[] nullKey) {
    Defaults defaults =
        new Defaults(layoutJson == null ? null : Router.parse(layoutJson, confVersion()), nullKey);
    FunctionRegistry registry = spark.sessionState().functionRegistry();
    for (KeyFunction function : KeyFunction.values()) {
      register(registry, function.sqlName(), info(function), defaults.builder(function));
    }
    register(registry, PartitionExpression.NAME, partitionInfo(), PARTITION_BUILDER);
  }

  private static void register(
      FunctionRegistry registry,
      String name,
      ExpressionInfo info,
      Function1<Seq<Expression>, Expression> builder) {
    // Built-in functions resolve before temporary ones, so where the session extension has
    // added this one, it is replaced in this session's registry instead.
    FunctionIdentifier builtin = FunctionRegistry$.MODULE$.builtinFunctionIdentifier(name);
    if (registry.functionExists(builtin)) {
      registry.registerFunction(builtin, info, builder);
    } else {
      registry.createOrReplaceTempFunction(name, builder, "java_udf");
    }
  }

  /** ks_partition's builder: it takes no defaults. */
  static final Function1<Seq<Expression>, Expression> PARTITION_BUILDER =
      args -> PartitionExpression.build(CollectionConverters.asJava(args));

  static ExpressionInfo partitionInfo() {
    return new ExpressionInfo(
        PartitionExpression.class.getName(), null, PartitionExpression.NAME,
        PartitionExpression.NAME + "(key, num_partitions, partitioner) - the partition another"
            + " system's partitioner gives the key, NULL where it picks none",
        "", "", "", "", "", "", "java_udf");
  }

  /**
   * Removes the functions the session extension added from this session, so that temporary
   * functions of the same names (the Arrow UDFs) are the ones SQL resolves.
   */
  public static void dropExtensionFunctions(SparkSession spark) {
    FunctionRegistry registry = spark.sessionState().functionRegistry();
    for (KeyFunction function : KeyFunction.values()) {
      registry.dropFunction(FunctionRegistry$.MODULE$.builtinFunctionIdentifier(function.sqlName()));
    }
    registry.dropFunction(FunctionRegistry$.MODULE$.builtinFunctionIdentifier(PartitionExpression.NAME));
  }

  /**
   * The column {@code function(key)}: the DataFrame form, for {@code spark_udfs.with_routing}.
   * {@code layoutJson} is used by ks_route only (null: the conf's or the default layout).
   */
  public static Column column(String function, Column key, String layoutJson, byte[] nullKey) {
    KeyFunction f = KeyFunction.named(function);
    Router router =
        f.routes() ? (layoutJson == null ? confLayout() : Router.parse(layoutJson, confVersion())) : null;
    return ExpressionUtils.column(new KeyExpression(ExpressionUtils.expression(key), f, router, nullKey));
  }

  /**
   * {@code function(key)} built only for its check of the key's type when the query is
   * analysed, never evaluated: it routes under the default layout and hashes a null key as no
   * bytes. The Arrow engine's functions refuse a key with it, in the JVM functions' words.
   */
  static KeyExpression keyTypeCheck(KeyFunction function, Expression key) {
    return new KeyExpression(key, function, function.routes() ? Router.DEFAULT : null, new byte[0]);
  }

  /**
   * The column of {@link #keyTypeCheck}: the Arrow UDFs of {@code spark_udfs.udfs} put it in a
   * branch that the optimizer removes ({@code false AND ...}), so that it costs nothing per row.
   */
  public static Column keyTypeCheck(String function, Column key) {
    return ExpressionUtils.column(
        keyTypeCheck(KeyFunction.named(function), ExpressionUtils.expression(key)));
  }

  /**
   * Makes the session's function {@code name} (the Arrow engine's SQL function of that keyshared
   * function, whose parameter is BINARY) refuse a key that is neither string nor binary when
   * the query is analysed, with the JVM function's message: otherwise the cast to its parameter
   * refuses it in Spark's words, or, without ANSI mode, turns an integer into its bytes (and an
   * untyped NULL would pass, which the JVM functions refuse). String and binary keys reach the
   * function's own builder unchanged.
   */
  public static void checkKeyTypes(SparkSession spark, String name) {
    KeyFunction function = KeyFunction.named(name);
    FunctionRegistry registry = spark.sessionState().functionRegistry();
    // The registry holds the temporary function under its qualified name (system.session.name).
    FunctionIdentifier builtin = FunctionRegistry$.MODULE$.builtinFunctionIdentifier(name);
    FunctionIdentifier id =
        CollectionConverters.asJava(registry.listFunction()).stream()
            .filter(f -> f.funcName().equals(name) && !f.equals(builtin))
            .findFirst()
            .orElseThrow(
                () -> new KeysharedException("no temporary function " + name + " in this session"));
    Function1<Seq<Expression>, Expression> builder = registry.lookupFunctionBuilder(id).get();
    ExpressionInfo info = registry.lookupFunction(id).get();
    Function1<Seq<Expression>, Expression> checked =
        args -> {
          if (!args.isEmpty() && args.head().resolved()) {
            DataType type = args.head().dataType();
            if (!(type instanceof StringType || type instanceof BinaryType)) {
              return keyTypeCheck(function, args.head());
            }
          }
          return builder.apply(args);
        };
    registry.registerFunction(id, info, checked);
  }

  /** The column {@code ks_partition(key, numPartitions, partitioner)}: the DataFrame form. */
  public static Column partitionColumn(Column key, int numPartitions, String partitioner) {
    return ExpressionUtils.column(
        new PartitionExpression(
            ExpressionUtils.expression(key), Partitioner.named(partitioner), numPartitions));
  }
}
