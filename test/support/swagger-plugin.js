// Runs @nestjs/swagger's CLI plugin inside ts-jest, as nest-cli.json does for `nest build`.
const transformer = require('@nestjs/swagger/plugin');

module.exports.name = 'nestjs-swagger-transformer';
module.exports.version = 1;
module.exports.factory = (compiler) =>
  transformer.before({ classValidatorShim: true, introspectComments: true }, compiler.program);
