/** Unit specs: beside the code, no database. */
module.exports = {
  rootDir: 'src',
  testRegex: '.*\\.spec\\.ts$',
  moduleFileExtensions: ['js', 'json', 'ts'],
  transform: {
    // Transpile only (each file on its own); set as a compiler option, ts-jest's own flag is deprecated.
    '^.+\\.ts$': ['ts-jest', { tsconfig: { isolatedModules: true } }],
    // jose ships ESM only; Node loads it with require(esm), Jest's CommonJS runtime cannot.
    '^.+/node_modules/jose/.+\\.js$': [
      'ts-jest',
      { tsconfig: { isolatedModules: true, allowJs: true, module: 'commonjs' } },
    ],
  },
  transformIgnorePatterns: ['/node_modules/(?!jose/)'],
  testEnvironment: 'node',
};
