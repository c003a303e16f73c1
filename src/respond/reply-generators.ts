import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { discoveredOnce } from '../common/reply/discovered';
import {
  type Generated,
  type Generation,
  GeneratesReplies,
  type GenerationPlace,
  type NextGeneration,
  type ReplyGenerator,
} from './reply-generation';

function placeOf(generator: ReplyGenerator): GenerationPlace {
  return Reflect.getMetadata(GeneratesReplies.KEY, generator.constructor) as GenerationPlace;
}

/** Every @GeneratesReplies participant, chained around the engine's call. */
@Injectable()
export class ReplyGenerators implements OnModuleInit {
  private generators: readonly ReplyGenerator[] = [];

  constructor(private readonly discovery: DiscoveryService) {}

  onModuleInit(): void {
    this.generators = discoveredOnce<ReplyGenerator>(
      this.discovery,
      GeneratesReplies.KEY,
      'reply generator',
    )
      // By their stated order, then class name: how modules were imported must not change what
      // wraps what.
      .sort(
        (a, b) =>
          placeOf(a).order - placeOf(b).order ||
          a.constructor.name.localeCompare(b.constructor.name),
      );
  }

  /** The generation through every participant, outermost first, with `engine` at the heart. */
  generate(generation: Generation, engine: NextGeneration): Promise<Generated> {
    const chain = this.generators.reduceRight<NextGeneration>(
      (next, generator) => (inner) => generator.generate(inner, next),
      engine,
    );
    return chain(generation);
  }
}
